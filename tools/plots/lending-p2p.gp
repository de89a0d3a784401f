# Device Lending, peer to peer in the three cases of device-lending-kvm-multidevice-2019 §6
# (latency model on), from scripts/bench-lending.sh:
# gnuplot -e "dir='tools/plots/'; in='p2p.tsv'; out='x.png'; size='4M'" lending-p2p.gp
#   in = case, hops, time per 4 KiB copy queued back to back (us), MB/s of SIZE copies,
#        median 4 KiB copy from doorbell to interrupt (us) (medians)
load dir . "common.gp"
set output out
unset logscale x
set xtics norotate offset 0,0 font ",10"
set title "Peer-to-peer copies by one accelerator's engine into another's BAR (latency model on)" font ",13"
set ylabel "4 KiB copy, queued back to back (us per copy)"
set y2label sprintf("MB/s of %s copies", size)
set yrange [0:*]
set y2range [0:*]
set ytics nomirror
set y2tics
set style fill solid 0.85 border rgb "#444444"
set boxwidth 0.35
set key outside bottom center horizontal box opaque
set bmargin 7
set offsets 0.2, 0.2, graph 0.12, 0
name(c) = c eq "local" ? "both local (no lending)" : c eq "same-lender" ? "both lent by one lender" : c eq "lent+local" ? "one lent, one the borrower's" : "lent by two lenders"
plot in using ($0 - 0.19):3:xtic(sprintf("%s\n%d hop%s", name(strcol(1)), $2, $2 == 1 ? "" : "s")) with boxes lc rgb "#1f5fbf" title "us per queued 4 KiB copy (left)", \
     '' using ($0 - 0.19):3:(sprintf("%.2f", $3)) with labels offset 0,0.7 notitle, \
     '' using ($0 + 0.19):4 axes x1y2 with boxes lc rgb "#e08a1e" title "MB/s (right)", \
     '' using ($0 + 0.19):4:(sprintf("%.0f", $4)) axes x1y2 with labels offset 0,0.7 notitle
