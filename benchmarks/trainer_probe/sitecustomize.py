"""Loaded by a ``yolo`` process that ``benchmarks/streaming_overhead.py --probe`` starts (this folder on its
PYTHONPATH): times what the trainer's platform integration does, so the streaming overhead on the trainer's side
is measured rather than guessed. Changes nothing it times.

Writes ``{name: [calls, wall seconds, CPU seconds of the calling thread]}`` to ``$LANNER_TRAINER_PROBE`` at exit:
each platform callback (on the training thread: the time training waits), each ``_send`` by event (in the
callback thread pool, except ``training_started``/``training_complete``/``checkpoint_saved``), the HTTP round
trips, the ``httpx.Client`` each ``_send`` builds, and the checkpoint upload.

With ``$LANNER_TRAINER_CAPTURE`` also set, every ``_send`` and upload is written to that file as one JSON line as
it happens (seconds since the first, the event and its data, or the upload's file name and size): the session
``benchmarks/stream_replay.py`` plays back against a server without a trainer."""

import atexit
import json
import os
import threading
import time

OUT = os.environ.get("LANNER_TRAINER_PROBE")
CAPTURE = os.environ.get("LANNER_TRAINER_CAPTURE")
if OUT:
    _stats: dict[str, list[float]] = {}
    _lock = threading.Lock()

    def _timed(name, function):
        def wrapper(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                with _lock:
                    entry = _stats.setdefault(name if isinstance(name, str) else name(*args), [0, 0.0, 0.0])
                    entry[0] += 1
                    entry[1] += time.perf_counter() - wall
                    entry[2] += time.thread_time() - cpu
        return wrapper

    import httpx
    from ultralytics.utils import uploads
    from ultralytics.utils.callbacks import platform

    httpx.Client.__init__ = _timed("httpx.Client() built per _send", httpx.Client.__init__)
    httpx.Client.send = _timed("HTTP round trip (httpx send)", httpx.Client.send)
    for _name, _callback in list(platform.callbacks.items()):
        platform.callbacks[_name] = _timed(f"callback {_name} (training thread)", _callback)
    platform._send = _timed(lambda event, *a, **k: f"_send {event}", platform._send)
    platform._upload_model = _timed("_upload_model", platform._upload_model)
    uploads.safe_upload = _timed("safe_upload (the PUT)", uploads.safe_upload)
    platform._get_system_metrics = _timed("_get_system_metrics", platform._get_system_metrics)

    if CAPTURE:
        _capture_start = time.perf_counter()

        def _captured(kind, function, describe):
            def wrapper(*args, **kwargs):
                line = {"t": round(time.perf_counter() - _capture_start, 3), "kind": kind, **describe(*args, **kwargs)}
                with _lock, open(CAPTURE, "a") as out:
                    out.write(json.dumps(line, default=str) + "\n")
                return function(*args, **kwargs)
            return wrapper

        platform._send = _captured("send", platform._send, lambda event, data, *a, **k: {
            "event": event, "data": platform._sanitize_json_value(data)})
        platform._upload_model = _captured("upload", platform._upload_model, lambda path, *a, **k: {
            "filename": os.path.basename(str(path)), "size": os.path.getsize(path)})

    @atexit.register
    def _write() -> None:
        with open(OUT, "w") as out:
            json.dump(_stats, out, indent=1)
