# The peer-to-peer matrix's latency (device-lending-kvm-multidevice-2019 Fig. 14,
# smartio-tocs-2021 Fig. 25b): per case, one 4 KiB copy from doorbell to interrupt, peer to peer
# and via RAM, as percentiles, from scripts/bench-lending.sh p2p:
# gnuplot -e "dir='tools/plots/'; in='p2p-lat.tsv'; out='x.png'; n='3000'" lending-p2p-lat.gp
#   in = case, p2p p50, p99, p99.99, via-RAM p50, p99, p99.99 (us, medians of the rounds)
load dir . "common.gp"
set output out
unset logscale x
set logscale y
set xtics norotate offset 0,0 font ",10"
set title sprintf("4 KiB copies between two accelerators, %s each: percentiles (latency model on)", n) font ",13"
set ylabel "us per copy (doorbell to interrupt)"
set style data histogram
set style histogram clustered gap 1.2
set style fill solid 0.85 border rgb "#444444"
set boxwidth 0.9
set key outside bottom center horizontal box opaque
set bmargin 7
name(c) = c eq "local" ? "both local" : c eq "same-lender" ? "same lender" : c eq "lent+local" ? "one lent, one own" : "two lenders"
plot in using 2:xtic(name(strcol(1))) title "p2p p50" lc rgb "#1f5fbf", \
     '' using 3 title "p2p p99" lc rgb "#5f8fdf", \
     '' using 4 title "p2p p99.99" lc rgb "#9fbfef", \
     '' using 5 title "via RAM p50" lc rgb "#e08a1e", \
     '' using 6 title "via RAM p99" lc rgb "#eeaa5e", \
     '' using 7 title "via RAM p99.99" lc rgb "#f6ca9e"
