"""Imports every domain's tables so Alembic sees one complete metadata."""

from lanner.accounts import models as _accounts  # noqa: F401
from lanner.annotation import models as _annotation  # noqa: F401
from lanner.assistant import models as _assistant  # noqa: F401
from lanner.autolabel import models as _autolabel  # noqa: F401
from lanner.billing import models as _billing  # noqa: F401
from lanner.datasets import models as _datasets  # noqa: F401
from lanner.db import Base
from lanner.db import leases as _leases  # noqa: F401
from lanner.deployments import models as _deployments  # noqa: F401
from lanner.embeddings import models as _embeddings  # noqa: F401
from lanner.exports import models as _exports  # noqa: F401
from lanner.gpus import models as _gpus  # noqa: F401
from lanner.integrations import models as _integrations  # noqa: F401
from lanner.projects import models as _projects  # noqa: F401
from lanner.review import models as _review  # noqa: F401
from lanner.status import StatusEvent as _status_events  # noqa: F401
from lanner.storage import models as _storage  # noqa: F401
from lanner.teams import models as _teams  # noqa: F401
from lanner.training import models as _training  # noqa: F401
from lanner.workflows import models as _workflows  # noqa: F401

metadata = Base.metadata
