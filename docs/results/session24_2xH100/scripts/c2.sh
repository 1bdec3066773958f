# Session 24, call 2: session 23's prepared docs/results/session23_2xH100/scripts/next_c3.sh, run as it is right
# after c1 on the same machine and trees (its logs are in ../c2). run(kind nvidia-h100-x2, carry [".deps"])
exec bash docs/results/session23_2xH100/scripts/next_c3.sh
