# Shared settings of the ntblend benchmark plots (loaded by the other scripts; plot.sh passes
# the data files and titles with -e). Sizes are bytes on a log2 axis, labelled in B/KiB/MiB.
set terminal pngcairo size 1000,620 enhanced font "DejaVu Sans,11" linewidth 1.5
set datafile separator "\t"
set key top left box opaque
set grid xtics ytics mytics lc rgb "#dddddd"
set border lc rgb "#444444"
set logscale x 2
size_label(x) = x >= 1048576 ? sprintf("%d MiB", int(x / 1048576 + 0.5)) : \
                x >= 1024 ? sprintf("%d KiB", int(x / 1024 + 0.5)) : sprintf("%d B", int(x + 0.5))
# A tick label every other power of two (x is a power of two): 4 B, 16 B, 64 B, ...
every_other(x) = int(log(x) / log(2) + 0.5) % 2 == 0 ? size_label(x) : ""
set xtics rotate by -35 offset -1,0 font ",10"
