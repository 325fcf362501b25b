"""What every job uses: TensorFlow's handles, errors, the problem's structure, tapes."""
