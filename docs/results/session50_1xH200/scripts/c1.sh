# Session 50 c1: session49_1xH200/scripts/next49_paced.sh, run as is (trees: scripts/ab_trees.sh base=main
# new=exp/ll-paced-waves, main at 4ea48e9): run(kind nvidia-h200, carry [".deps", ".ab"]).
exec bash docs/results/session49_1xH200/scripts/next49_paced.sh "$@"
