"""Voice in the windows, over the Qt-free `llamachat.voice`: dictation into the composer
(`dictation_input.DictationInput`: the microphone button, hold-to-talk, "Transcribe audio
file…"), replies read aloud (`read_aloud`: the ⋯ menu's Read aloud, one voice for the app)
and voice mode (`voice_mode`: listen, send on a pause, read the reply, listen again)."""
