# Session 25, call 1 (run(kind nvidia-h100-x2, carry [".deps", ".ab"])): session 24's prepared sweep, run as it was:
# Before (here): scripts/ab_trees.sh sweep=main+docs/results/session24_2xH100/combine-one-role-sweep_db6a8ae.patch
bash docs/results/session24_2xH100/scripts/next_sweep.sh
