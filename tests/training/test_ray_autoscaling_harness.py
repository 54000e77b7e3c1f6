"""The autoscaling Ray harness (tests/ray_autoscaling.py) against real Ray Jobs, no Lanner server: a job that
needs a GPU no node has waits while the autoscaler launches a node of the right type, runs there, and the node
goes when idle; a job whose node is preempted (its raylet killed) fails, and Ray says why. What Ray answers here
is recorded in tests/training/recorded/ray_autoscaling/ (README.md: the numbers)."""

from __future__ import annotations

import pytest

from tests.ray_autoscaling import AutoscalingRay, autoscaling_ray, node_types  # noqa: F401  (the fixture)
from tests.servers import wait_for

pytestmark = pytest.mark.e2e
pytest.importorskip("ray")

H100 = "lanner-gpu:h100-sxm"
# Deadlines are generous: a launch takes ~5 s and a lost node is declared dead after ~16 s on an idle machine,
# several times that on a busy one.
LAUNCH = 120


def h100_nodes(cluster: AutoscalingRay) -> list:
    return [node for node in cluster.worker_nodes() if node.node_type == "h100"]


def node_state(cluster: AutoscalingRay, node_id: str) -> tuple[str, str | None]:
    node = next(node for node in cluster.nodes() if node["node_id"] == node_id)
    return node["state"], node["state_message"]


@node_types({"h100": {"resources": {"CPU": 1, H100: 1}, "max_workers": 1},
             "rtx-4090": {"resources": {"CPU": 1, "lanner-gpu:rtx-4090": 1}, "max_workers": 1}},
            idle_timeout_minutes=0.2)
def test_a_job_waits_for_its_node_type_and_fails_when_the_node_is_preempted(
        autoscaling_ray: AutoscalingRay) -> None:  # noqa: F811
    from ray.job_submission import JobStatus, JobSubmissionClient

    ended = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)
    cluster = autoscaling_ray
    jobs = JobSubmissionClient(cluster.address)
    assert cluster.worker_nodes() == []

    # (a) From zero nodes: the job is PENDING while an h100 node launches, then runs there and succeeds.
    job = jobs.submit_job(entrypoint="python -c 'import time; time.sleep(2)'", entrypoint_num_cpus=1,
                          entrypoint_resources={H100: 1})
    status = jobs.get_job_status(job)
    assert cluster.worker_nodes() == [] and status == JobStatus.PENDING  # no node yet: it cannot have started

    def launching() -> bool:  # the report shows the launch for a tick or two; the node may be up by now
        text = cluster.cluster_status(formatted=True)["data"]["clusterStatus"]
        return "h100, 1 launching" in text or bool(h100_nodes(cluster))

    wait_for(launching, timeout=LAUNCH, what="the autoscaler to launch an h100 node", every=0.5)
    [node] = wait_for(lambda: h100_nodes(cluster), timeout=LAUNCH, what="an h100 node", every=0.5)
    assert node.resources[H100] == 1 and "lanner-gpu:rtx-4090" not in node.resources
    wait_for(lambda: jobs.get_job_status(job) in ended, timeout=LAUNCH, what="the job to end", every=0.5)
    info = jobs.get_job_info(job)
    assert info.status == JobStatus.SUCCEEDED, info.message
    assert info.driver_node_id == node.node_id

    # ... and the idle node goes after idle_timeout_minutes (12 s), terminated by the autoscaler.
    wait_for(lambda: not cluster.worker_nodes(), timeout=LAUNCH, what="the idle node to go", every=0.5)
    state, message = node_state(cluster, node.node_id)
    assert state == "DEAD" and message.startswith("Expected termination"), message

    # (b) The node running a job is preempted: Ray fails the job, because its supervisor lived on that node.
    long_job = jobs.submit_job(entrypoint="python -c 'import time; time.sleep(600)'", entrypoint_num_cpus=1,
                               entrypoint_resources={H100: 1})
    wait_for(lambda: jobs.get_job_status(long_job) == JobStatus.RUNNING, timeout=LAUNCH,
             what="the long job to run", every=0.5)
    victim = jobs.get_job_info(long_job).driver_node_id
    assert victim in {n.node_id for n in h100_nodes(cluster)} and victim != node.node_id
    cluster.kill_raylet(victim)
    wait_for(lambda: jobs.get_job_status(long_job) in ended, timeout=LAUNCH, what="Ray to end the job", every=0.5)
    info = jobs.get_job_info(long_job)
    assert info.status == JobStatus.FAILED
    assert info.error_type == "JOB_SUPERVISOR_ACTOR_DIED"
    assert info.message.startswith("Job supervisor actor died") and victim in info.message
    assert info.driver_exit_code is None
    state, message = node_state(cluster, victim)
    assert state == "DEAD" and message.startswith("Unexpected termination"), message
    # Only h100 nodes were ever launched: the head (fff…f00000) and the two h100 nodes.
    everyone = sorted(cluster.nodes(), key=lambda n: n["node_id"])
    assert [H100 in n["resources_total"] for n in everyone] == [False, True, True]
