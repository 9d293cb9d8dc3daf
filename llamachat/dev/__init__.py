"""Tools for developing llamachat, never used by the program itself.

`scripted_router` (a fake llama.cpp router for tests and benchmarks, Qt-free),
`bench` and `bench_render` (the benchmark suite; they drive the real window),
`bench_skills` (the skills benchmark), `structure` (the layout check) and `build` (the
one-folder build). The tests, their fixtures and helpers are in `llamachat.tests`.
"""
