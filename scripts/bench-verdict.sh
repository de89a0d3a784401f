#!/usr/bin/env bash
# Is an after/before difference beyond the noise of the rounds? Sourced by bench-compare.sh.
#
#   bench_verdict hi|lo   reads lines "b VALUE" (a round before) and "a VALUE" (a round after)
#                         and prints, tab-separated: the median before, the median after, their
#                         ratio after/before, the 2.5th and 97.5th percentiles of that ratio over
#                         4000 bootstrap resamples (each side's rounds drawn with replacement,
#                         the ratio of the resamples' medians), and the verdict: "worse" when the
#                         whole interval lies on the worse side of 1 (above it for lo, lower is
#                         better; below it for hi), "better" when it lies on the other side,
#                         "level" when it holds 1. With fewer than 3 rounds on a side the
#                         interval is empty and the verdict "-"; with none on a side, "no data".
#                         The seed is fixed: the same rounds give the same interval.
#
# A bootstrap needs no assumption about how the rounds are spread (these machines give bimodal
# rounds: a sleep or none in a round trip), and the median resists the one round that a
# neighbour's burst spoilt.
bench_verdict() {
  awk -v dir="$1" '
    function med(x, n,   i, j, t, y) {
      for (i = 1; i <= n; i++) y[i] = x[i]
      for (i = 2; i <= n; i++) { t = y[i]; for (j = i - 1; j >= 1 && y[j] > t; j--) y[j + 1] = y[j]; y[j + 1] = t }
      return n % 2 ? y[(n + 1) / 2] : (y[n / 2] + y[n / 2 + 1]) / 2
    }
    $1 == "b" && $2 != "" && $2 != "null" { b[++nb] = $2 + 0 }
    $1 == "a" && $2 != "" && $2 != "null" { a[++na] = $2 + 0 }
    END {
      if (!nb || !na) { print "nan\tnan\tnan\tnan\tnan\tno data"; exit }
      mb = med(b, nb); ma = med(a, na)
      r = mb > 0 ? ma / mb : 0
      if (nb < 3 || na < 3 || mb <= 0) { printf "%g\t%g\t%.3f\t\t\t-\n", mb, ma, r; exit }
      srand(27); k = 0
      for (i = 1; i <= 4000; i++) {
        for (j = 1; j <= nb; j++) sb[j] = b[1 + int(rand() * nb)]
        for (j = 1; j <= na; j++) sa[j] = a[1 + int(rand() * na)]
        m = med(sb, nb)
        if (m > 0) q[++k] = med(sa, na) / m
      }
      if (!k) { printf "%g\t%g\t%.3f\t\t\t-\n", mb, ma, r; exit }
      # the 2.5th and 97.5th percentiles of the k ratios
      sort_q(q, k)
      lo = q[1 + int(0.025 * (k - 1))]; hi = q[1 + int(0.975 * (k - 1))]
      v = "level"
      if ((dir == "lo" && lo > 1) || (dir == "hi" && hi < 1)) v = "worse"
      else if ((dir == "lo" && hi < 1) || (dir == "hi" && lo > 1)) v = "better"
      printf "%g\t%g\t%.3f\t%.3f\t%.3f\t%s\n", mb, ma, r, lo, hi, v
    }
    function sort_q(x, n,   i, j, t, gap) { # shell sort: 4000 values
      for (gap = int(n / 2); gap > 0; gap = int(gap / 2))
        for (i = gap + 1; i <= n; i++) {
          t = x[i]
          for (j = i; j > gap && x[j - gap] > t; j -= gap) x[j] = x[j - gap]
          x[j] = t
        }
    }'
}
