# A stand-in for Parley's trainer (train/), for app/cli's tests of the fine-tune commands
# without PyTorch training: the voice recipe's modules, quick and deterministic.
