# Marker: tune.FindTrainDir looks for trainer.py; the fake voice recipe is in chattts/.
