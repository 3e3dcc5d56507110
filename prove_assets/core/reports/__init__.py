"""Reports over every partition: the leaderboard, calibration, construction quality, the audit and the explorer."""
