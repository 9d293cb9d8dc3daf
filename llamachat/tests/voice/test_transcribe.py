"""The tests of `llamachat.voice.transcribe`: the engines and the streaming Dictation, with real speech."""

from __future__ import annotations

import threading

import pytest

from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.router.client import Client
from llamachat.router.models import ModelInfo, Models
from llamachat.tests.support import SMOL_ID
from llamachat.tests.voice.conftest import SPEECH, silence
from llamachat.voice import VoiceError
from llamachat.voice.audio_files import decode, read_sound
from llamachat.voice.capture import Playback, seconds
from llamachat.voice.transcribe import (
    Dictation,
    Heard,
    LocalTranscriber,
    RouterTranscriber,
    choose_transcriber,
    transcribe_file,
)

HEARING = Model("voxtral-mini", "loaded", modalities=("text", "audio"))
TEXT_ONLY = Model("SmolLM2-135M-Instruct.Q4_1", "loaded")


def words(text: str) -> list[str]:
    """The words of `text`, lowercased, without punctuation."""
    return "".join(c if c.isalnum() or c.isspace() else " " for c in text.lower()).split()


@pytest.fixture
def hearing_router():
    with ScriptedRouter([HEARING, TEXT_ONLY]) as router:
        client = Client(router.url)
        yield router, client
        client.close()


class TestRouterTranscriber:
    """llama.cpp's POST /v1/audio/transcriptions."""

    def test_the_sound_goes_up_as_a_wav_file_and_the_text_comes_back(
        self, decoding, hearing_router
    ) -> None:
        router, client = hearing_router
        uploads: list[bytes] = []

        def hear(data: bytes) -> str:
            uploads.append(data)
            return f"{seconds(decode(data)):.2f} seconds"

        router.hear = hear
        pcm = read_sound(SPEECH / "short.mp3")

        text = RouterTranscriber(client, HEARING.id).transcribe(pcm)

        assert text == f"{seconds(pcm):.2f} seconds"
        assert decode(uploads[0]) == pcm
        sent = router.requests[-1]
        assert (sent.path, sent.json["model"], sent.json["response_format"]) == (
            "/v1/audio/transcriptions",
            HEARING.id,
            "json",
        )

    def test_a_model_that_does_not_hear_is_refused_with_the_servers_words(
        self, decoding, hearing_router
    ) -> None:
        _router, client = hearing_router

        with pytest.raises(VoiceError, match="does not support audio input"):
            RouterTranscriber(client, TEXT_ONLY.id).transcribe(read_sound(SPEECH / "short.mp3"))

    def test_the_router_is_chosen_when_it_lists_a_model_that_hears(self, hearing_router) -> None:
        _router, client = hearing_router
        listed = [
            ModelInfo(TEXT_ONLY.id, "loaded"),
            ModelInfo(HEARING.id, "unloaded", modalities=("text", "audio")),
        ]

        chosen = choose_transcriber(client, listed)

        assert isinstance(chosen, RouterTranscriber) and chosen.model == HEARING.id
        assert isinstance(choose_transcriber(client, listed[:1]), LocalTranscriber)


class TestDictation:
    """Streaming recognition over a source played in at real-time rate, as a microphone hears it."""

    def test_the_local_engine_shows_words_as_they_are_spoken_then_the_whole_sentence(
        self, local_engine
    ) -> None:
        heard: list[Heard] = []
        pcm = read_sound(SPEECH / "dictation.wav") + silence(1.5)

        text = Dictation(local_engine, heard.append, end_on_silence=True).run(Playback(pcm))

        assert words(text) == words(
            "Please summarize the meeting notes from Tuesday and list the open questions."
        )
        assert heard[-1].final and heard[-1].text == text
        assert heard[-1].spoken_s == pytest.approx(4.7, abs=0.2)
        partial = [h for h in heard if not h.final and h.heard_s < 4.0]
        assert partial and "summarize" in words(partial[-1].text)
        # Ended by the silence after the last word, not by the end of the sound.
        assert heard[-1].heard_s < seconds(pcm)

    def test_dictation_through_the_routers_endpoint_with_a_real_engine_behind_it(
        self, local_engine, hearing_router
    ) -> None:
        router, client = hearing_router
        router.hear = lambda data: local_engine.transcribe(decode(data))
        heard: list[Heard] = []
        pcm = read_sound(SPEECH / "ten_seconds.ogg")

        text = Dictation(RouterTranscriber(client, HEARING.id), heard.append).run(
            Playback(pcm, speed=2.0)
        )

        assert {"lazy", "dog", "afternoon", "sun"} <= set(words(text))
        assert len([r for r in router.requests if r.path == "/v1/audio/transcriptions"]) > 1
        assert sum(not h.final for h in heard) > 1

    def test_stop_ends_the_dictation_with_what_was_heard(self, decoding, hearing_router) -> None:
        router, client = hearing_router
        router.script(*[Reply(content="heard") for _ in range(50)])
        heard: list[Heard] = []
        playback = Playback(read_sound(SPEECH / "ten_seconds.ogg"), speed=1.0)

        def stop_once_heard(h: Heard) -> None:
            heard.append(h)
            dictation.stop()  # as the person releasing the hold-to-talk key

        dictation = Dictation(RouterTranscriber(client, HEARING.id), stop_once_heard)
        done = threading.Event()
        threading.Thread(target=lambda: (dictation.run(playback), done.set()), daemon=True).start()

        assert done.wait(30)
        assert heard[-1].final and heard[-1].text.startswith("heard")
        assert heard[-1].heard_s < 9.0

    def test_silence_is_never_sent_to_the_engine(self, decoding, hearing_router) -> None:
        router, client = hearing_router

        text = Dictation(RouterTranscriber(client, HEARING.id), lambda h: None).run(
            Playback(silence(3.0), speed=0)
        )

        assert text == ""
        assert not [r for r in router.requests if r.path == "/v1/audio/transcriptions"]


def test_a_whole_file_is_transcribed_by_the_local_engine(local_engine) -> None:
    text = transcribe_file(read_sound(SPEECH / "ten_seconds.ogg"), local_engine)

    assert {"lazy", "dog", "wakes", "afternoon"} <= set(words(text))


def test_the_router_refusing_is_a_sentence_for_the_user(decoding) -> None:
    with ScriptedRouter([TEXT_ONLY]) as router:
        client = Client(router.url)
        with pytest.raises(VoiceError) as caught:
            transcribe_file(
                read_sound(SPEECH / "short.mp3"), RouterTranscriber(client, TEXT_ONLY.id)
            )
        client.close()

    assert str(caught.value).startswith(f"The router could not transcribe with {TEXT_ONLY.id}:")


@pytest.mark.real_router
def test_the_real_llama_server_refuses_smollm2_and_the_local_engine_is_chosen(
    decoding, real_router
) -> None:
    client = Client(real_router.url)
    try:
        with pytest.raises(VoiceError, match="The current model does not support audio input"):
            RouterTranscriber(client, SMOL_ID).transcribe(read_sound(SPEECH / "short.mp3"))
        assert isinstance(choose_transcriber(client, Models(client).list()), LocalTranscriber)
    finally:
        client.close()


def test_the_vocabulary_spells_byte_level_tokens_and_leaves_special_ones_out() -> None:
    from llamachat.voice.transcribe import Vocabulary

    vocabulary = Vocabulary("Hello\nĠcaf\nÃ©\n!\n<|endoftext|>\n<|notimestamps|>\n")

    assert vocabulary.text([0, 1, 2, 3, 4, 5]) == "Hello café!"
    assert vocabulary.id("<|notimestamps|>") == 5


def test_a_dictation_releases_its_source_when_the_engine_fails(decoding) -> None:
    class Broken:
        description = "an engine that fails"

        def transcribe(self, pcm: bytes) -> str:
            raise VoiceError("The local speech engine failed: out of memory")

    playback = Playback(read_sound(SPEECH / "dictation.wav"), speed=4.0)

    with pytest.raises(VoiceError, match="out of memory"):
        Dictation(Broken(), lambda heard: None).run(playback)

    assert playback.read() is None
