"""The settle loop: files PUT straight into a bucket, completed but not hashed yet, are hashed and filed under
their digest here, off the request path (``storage.upload_sessions.settle``).

``upload.complete`` only HEADs the staged object (its size), so it answers in one round trip to the bucket
whatever the file's size; reading every byte back is this loop's work, woken by each completion (once it
committed; the pass starts when completions pause for ``QUIET_SECONDS``, one interval after the first at the
latest) and otherwise every ``LANNER_UPLOAD_SETTLE_SECONDS``. One process settles at a time (its lease); an
import worker that reaches a file first settles it as it reads it, and the loop then finds it done. A settle
that fails (the bucket did not answer) is retried on the next pass: the staged object is kept until the
digest is recorded, and the collector never deletes it meanwhile.
"""

from __future__ import annotations

import logging

from lanner.context import AppContext
from lanner.periodic import BackgroundLoop
from lanner.storage import upload_sessions

log = logging.getLogger(__name__)
# A pass starts once completions paused this long (or one interval after the first): a client uploading files one
# after another gets its calls and PUTs answered without the settling of the previous files beside them (half
# its rate on a 2-core host with moto, issue 30); the files are settled right after its last one.
QUIET_SECONDS = 0.5


class UploadSettler(BackgroundLoop):
    def __init__(self, ctx: AppContext) -> None:
        super().__init__("lanner-upload-settle", lambda: ctx.settings.upload_settle_seconds, log,
                         lease=ctx.lease("lanner-upload-settle"), quiet=QUIET_SECONDS)
        self.ctx = ctx

    def one_pass(self) -> int:
        """Settle every staged upload, oldest first; returns how many were settled (or rejected) now. One that
        fails is logged and left for the next pass; the others go on."""
        if not self.ctx.blobs.presigns:
            return 0
        with self.ctx.db.read_session() as session:
            waiting = upload_sessions.unsettled(session)
        done = 0
        for upload_id in waiting:
            try:
                upload_sessions.settle(self.ctx.db, self.ctx.blobs, upload_id,
                                       max_bytes=self.ctx.settings.max_upload_bytes)
            except upload_sessions.UploadLost as lost:
                log.info("upload %s rejected: %s", upload_id, lost.message)
            except Exception:
                log.exception("settling upload %s failed; the next pass retries", upload_id)
                continue
            done += 1
        return done
