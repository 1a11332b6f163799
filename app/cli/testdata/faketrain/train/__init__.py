# A stand-in for Parley's trainer (train/), for app/cli's tests of the fine-tune commands
# without PyTorch training: the voice and recogniser recipes' modules, quick and deterministic.
