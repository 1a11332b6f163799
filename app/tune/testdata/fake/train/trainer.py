# Marker: tune.FindTrainDir looks for trainer.py; the fake trainer is fake.py.
