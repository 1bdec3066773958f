# Session 28, c2: docs/results/session27_2xH100/scripts/next_pair_passes.sh, run as it is on branch exp/pair-passes
# rebased onto main (600db57): run(kind nvidia-h100-x2, carry [".deps"]),
#   bash docs/results/session27_2xH100/scripts/next_pair_passes.sh
exec bash docs/results/session27_2xH100/scripts/next_pair_passes.sh
