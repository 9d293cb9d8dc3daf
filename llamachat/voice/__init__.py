"""Voice: dictation into the message box, files transcribed into it, and replies read aloud.

    availability    what is installed (the `voice` extra), the one command that adds it,
                    the local speech model's folder; VoiceError, VoiceMissing
    capture         sound as 16 kHz mono PCM chunks: Microphone (miniaudio), Playback (a
                    decoded file played in at real-time rate, as a microphone would hear it)
    audio_files     .wav/.mp3/.ogg/.flac read through the file gate and decoded; WAV bytes
    transcribe      the engines (RouterTranscriber: llama.cpp's /v1/audio/transcriptions;
                    LocalTranscriber: Whisper tiny.en through CTranslate2), choose_transcriber,
                    and Dictation (streaming recognition: partial text as it is heard)
    log_mel         Whisper's input features (the log-mel spectrogram), with numpy
    sentences       a streamed reply cut into sentences to speak (markdown and code not read)
    speech          the speech engines: a Piper voice model (voice_model), espeak-ng;
                    find_speaker
    playback        where speech goes: the sound device (miniaudio), a WAV file
    reader          sentences spoken in order, the next made while one plays; stop, speed

Optional packages (miniaudio, CTranslate2, numpy, the model wheel) are imported only when
used: the base install imports this package and is told what to install.

Qt-free.

Errors: one tree, in `availability`:

    VoiceError(Exception)   a sentence the user reads: no microphone, access denied, the
    │                       device unplugged, a file not read, the router's refusal
    ├── VoiceMissing        the voice extra is not installed (the message has the command)
    ├── SpeechUnavailable   no voice to read with (what to point to or install)
    ├── SpeechError         a voice failed on a sentence
    └── PlaybackError       no sound output device, or it failed
"""

from llamachat.voice.availability import INSTALL_COMMAND, VoiceError, VoiceMissing

__all__ = ["INSTALL_COMMAND", "VoiceError", "VoiceMissing"]
