set terminal pngcairo noenhanced size 900,600 font ',11'
set output 'experiments/voita-table-cpu/records/plots/bleu_vs_heads.png'
set datafile missing 'NaN'
set grid
set key bottom right
set xlabel 'attention heads kept (encoder + decoder + decoder-encoder)'
set ylabel 'dev BLEU against the first reference (decode.* settings of each checkpoint)'
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1
plot 'experiments/voita-table-cpu/records/plots/bleu_vs_heads.dat' using 1:2 with points pt 7 ps 1.5 title 'pruned (from trained)', \
  '' using 1:2:4 with labels offset 0,1 font ',8' notitle, \
  '' using 1:3 with points pt 5 ps 1.3 title 'pruned architecture from scratch', \
  '' using 1:5 with points pt 9 ps 1.6 title 'zero-pruning control', \
  33.507 with lines dt 2 lw 2 title 'baseline (33.51)', \
  33.722 with lines dt 4 lw 1.5 title 'control all-l0 (33.72)', \
  33.117 with lines dt 4 lw 1.5 title 'control enc-l0 (33.12)'
