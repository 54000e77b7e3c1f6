"""The local executor with real processes: exit codes map to states, a stop reaches the whole process
group and ends with SIGKILL when SIGTERM is ignored, and a restarted server recognises its workers."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lanner.training.executors import JobState, LaunchDeferred, LaunchSpec
from lanner.training.executors import local as local_module
from lanner.training.executors.local import LocalExecutor


def spec(tmp_path: Path, code: str, run_id: int = 1, gpu_type: str = "cpu") -> LaunchSpec:
    return LaunchSpec(run_id=run_id, attempt=1, gpu_type=gpu_type, command=[sys.executable, "-c", code],
                      env={"PATH": "/usr/bin:/bin"}, workdir=str(tmp_path / "work"))


def wait_state(executor: LocalExecutor, external_id: str, *states: JobState, timeout: float = 20) -> JobState:
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = executor.status(external_id).state
        if state in states:
            return state
        time.sleep(0.05)
    raise AssertionError(f"still {executor.status(external_id)}")


def test_exit_codes_map_to_states_and_logs_are_kept(tmp_path):
    executor = LocalExecutor(tmp_path / "runs", max_cpu_runs=3, gpus={})
    ok = executor.launch(spec(tmp_path, "print('hello from the worker')", run_id=1))
    failed = executor.launch(spec(tmp_path, "import sys; sys.exit(3)", run_id=2))
    killed = executor.launch(spec(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", run_id=3))
    assert wait_state(executor, ok, JobState.SUCCEEDED) is JobState.SUCCEEDED
    assert wait_state(executor, failed, JobState.FAILED) and executor.status(failed).exit_code == 3
    # Each worker is waited for: on a busy machine any of them may still be starting when the first is done.
    assert wait_state(executor, killed, JobState.LOST) is JobState.LOST
    assert "signal 9" in executor.status(killed).message
    assert "hello from the worker" in executor.log_tail(ok)


def test_capacity_counts_live_workers(tmp_path):
    executor = LocalExecutor(tmp_path / "runs", max_cpu_runs=2, gpus={"l4": ["0", "1"]})
    assert executor.capacity()["cpu"].free == 2 and executor.capacity()["l4"].total == 2
    running = executor.launch(spec(tmp_path, "import time; time.sleep(30)"))
    assert executor.capacity()["cpu"].free == 1
    gpu = executor.launch(spec(tmp_path, "import os, time; print(os.environ['CUDA_VISIBLE_DEVICES']); "
                                         "time.sleep(30)", run_id=2, gpu_type="l4"))
    assert executor.free_devices("l4") == ["1"] and executor.offers("l4") and not executor.offers("h100-sxm")
    executor.kill(running)
    executor.kill(gpu)
    assert executor.capacity()["cpu"].free == 2


def test_stop_escalates_to_sigkill_for_a_worker_that_ignores_sigterm(tmp_path, monkeypatch):
    monkeypatch.setattr(local_module, "KILL_AFTER_SECONDS", 0.5)
    executor = LocalExecutor(tmp_path / "runs", max_cpu_runs=1, gpus={})
    stubborn = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)']); "
                "open('child.pid', 'w').write(str(child.pid)); print('ready', flush=True); time.sleep(60)")
    external_id = executor.launch(spec(tmp_path, stubborn))
    child_pid_file = tmp_path / "work" / "child.pid"
    deadline = time.time() + 20
    while not child_pid_file.exists() and time.time() < deadline:
        time.sleep(0.05)
    child = int(child_pid_file.read_text())
    executor.stop(external_id)
    assert wait_state(executor, external_id, JobState.LOST, timeout=10) is JobState.LOST  # SIGKILL, not SIGTERM
    deadline = time.time() + 5
    while not gone(child) and time.time() < deadline:
        time.sleep(0.05)
    assert gone(child)  # the whole group was killed, the child that ignored SIGTERM too


def gone(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_restarted_server_recognises_its_worker_by_pid_and_start_time(tmp_path):
    first = LocalExecutor(tmp_path / "runs", max_cpu_runs=1, gpus={})
    external_id = first.launch(spec(tmp_path, "import time; time.sleep(30)"))
    second = LocalExecutor(tmp_path / "runs", max_cpu_runs=1, gpus={})  # no Popen: adopted by its id
    assert second.status(external_id).state is JobState.RUNNING
    second.kill(external_id)
    wait_state(first, external_id, JobState.LOST)  # the parent reaps it
    assert second.status(external_id).state is JobState.LOST
    recycled = external_id.split(":")
    recycled[1] = str(int(recycled[1]) + 1)  # same pid, another start time: not ours
    assert second.status(":".join(recycled)).state is JobState.LOST


def test_a_run_on_several_gpus_gets_them_together_or_waits(tmp_path):
    executor = LocalExecutor(tmp_path / "runs", max_cpu_runs=1, gpus={"l4": ["0", "1", "2"]})
    assert executor.most_devices("l4") == 3 and executor.most_devices("cpu") == 1 and executor.most_devices("t4") == 0
    show = "import os, time; print('visible', os.environ['CUDA_VISIBLE_DEVICES'], flush=True); time.sleep(30)"
    pair = executor.launch(replace(spec(tmp_path, show, run_id=1, gpu_type="l4"), gpu_count=2))
    try:
        assert pair.partition("@")[0].endswith(":l4:0,1") and executor.capacity()["l4"].free == 1
        with pytest.raises(LaunchDeferred, match="1 of the 2 l4 it needs are free"):
            executor.launch(replace(spec(tmp_path, show, run_id=2, gpu_type="l4"), gpu_count=2))
        with pytest.raises(RuntimeError, match="this machine has 3 l4, not the 4 the run needs"):
            executor.launch(replace(spec(tmp_path, show, run_id=3, gpu_type="l4"), gpu_count=4))
        deadline = time.time() + 20
        while "visible" not in executor.log_tail(pair) and time.time() < deadline:
            time.sleep(0.05)
        assert executor.log_tail(pair) == "visible 0,1"
    finally:
        executor.kill(pair)
    assert executor.capacity()["l4"].free == 3


def test_a_worker_another_machine_launched_is_neither_read_nor_signalled_here(tmp_path, monkeypatch):
    """The supervisor's lease moved to another host while this worker trains: that host must not take "no such
    pid" for "gone" (it would relaunch the run beside its live trainer), nor kill an unrelated process of its
    own with the same pid. Its status cannot be read there (the supervisor then judges by the run's events)."""
    executor = LocalExecutor(tmp_path / "runs", max_cpu_runs=1, gpus={})
    here = executor.launch(spec(tmp_path, "import time; time.sleep(60)"))
    assert wait_state(executor, here, JobState.RUNNING) is JobState.RUNNING and "@" in here
    elsewhere = LocalExecutor(tmp_path / "runs", max_cpu_runs=1, gpus={})  # the same ids, read on another host
    monkeypatch.setattr(local_module, "this_machine", lambda: "another-machine")
    with pytest.raises(local_module.WorkerElsewhere):
        elsewhere.status(here)
    elsewhere.stop(here)
    elsewhere.kill(here)
    assert elsewhere.capacity()["cpu"].free == 1  # that machine's slots are not this one's
    monkeypatch.undo()
    assert executor.status(here).state is JobState.RUNNING  # untouched by the other host
    executor.kill(here)
    assert wait_state(executor, here, JobState.LOST) is JobState.LOST
    # An id written before machines were kept is still read as this machine's.
    assert executor.status(here.partition("@")[0]).state is JobState.LOST
