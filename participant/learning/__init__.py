"""The participant's learning side: frozen CLIP backbone, CoOp prompt learner, strategies."""
