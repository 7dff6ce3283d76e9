"""The bottom package: what every other package builds on and that knows nothing of networks or
guides: the error types (`base.errors`), the PRNG helpers (`base.prng`), the structure keys of
compiled functions (`base.value_key`), the data container (`base.data`), argument validation
(`base.validation`) and atomic folder writes (`base.atomic_dir`)."""
