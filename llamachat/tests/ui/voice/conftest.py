"""The voice fixtures (recorded speech, the local engine or a skip) for the windows' tests."""

from llamachat.tests.voice.conftest import decoding, local_engine  # noqa: F401 - fixtures
