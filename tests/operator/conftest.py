"""The operator's tests drive the supervisor by hand against the pools' scripted executor, as the training tests
do: their settings (no background passes, metering every pass) and their ``shapes`` dataset."""

from tests.training.conftest import settings, shapes  # noqa: F401  (the fixtures)
