"""The tests of `llamachat.sound`."""

from __future__ import annotations

import pytest

from llamachat import sound
from llamachat.tests.support import mp3_bytes, write_wav


class TestSound:
    """How long a sound lasts, from its header."""

    def test_a_wav_says_its_length(self, tmp_path) -> None:
        data = write_wav(tmp_path / "a.wav", seconds=2.5).read_bytes()
        assert sound.seconds(data, "wav") == 2.5

    @pytest.mark.parametrize("id3", [False, True], ids=["bare", "id3_tag"])
    def test_a_constant_bit_rate_mp3_s_length_follows_from_its_size(self, id3) -> None:
        """1,000 frames of 1,152 samples at 44.1 kHz: 26.1 s (the size and the bit rate say
        26.06 s: frames are not a whole number of bytes at 128 kbit/s)."""
        assert sound.seconds(mp3_bytes(1000, id3=id3), "mp3") == pytest.approx(26.1, abs=0.1)

    def test_a_variable_bit_rate_mp3_says_its_frames_in_its_xing_header(self) -> None:
        assert sound.seconds(mp3_bytes(10, xing=2000), "mp3") == pytest.approx(2000 * 1152 / 44100)

    @pytest.mark.parametrize(
        ("data", "audio_format"),
        [
            (b"RIFF\x00\x00", "wav"),
            (b"not a sound at all" * 10, "mp3"),
            (b"", "mp3"),
            (b"x", "ogg"),
        ],
    )
    def test_a_file_it_cannot_read_has_no_length(self, data, audio_format) -> None:
        assert sound.seconds(data, audio_format) is None
