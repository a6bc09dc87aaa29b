#!/usr/bin/env Rscript
# R reference for mrcstats.stats.contingency: fisher.test and chisq.test on table CSV files.
#
# Usage: Rscript R/fisher_chisq.R [--alternative=two.sided|less|greater] [--no-correct]
#                                 [--sim=B,K] [--workspace=N] TABLE.csv ...
# TABLE.csv: first row column labels, first column row labels, cells counts.
# Prints one JSON array on stdout, one object per file:
#   {"file", "fisher": {"p", "odds_ratio", "conf_int"} | {"error"},
#    "chisq": {"statistic", "df", "p", "expected", "residuals", "stdres", "warning"} | {"error"},
#    "fisher_sim": [p for seeds 1..K]  (only with --sim; B replicates each)}
# chisq.test is run on the table with all-zero rows and columns dropped (as mrcstats does).
args <- commandArgs(trailingOnly = TRUE)
alternative <- "two.sided"; correct <- TRUE; sim <- NULL; workspace <- 2e7
files <- character(0)
for (a in args) {
  if (startsWith(a, "--alternative=")) alternative <- sub("--alternative=", "", a, fixed = TRUE)
  else if (a == "--no-correct") correct <- FALSE
  else if (startsWith(a, "--sim=")) sim <- as.integer(strsplit(sub("--sim=", "", a, fixed = TRUE), ",")[[1]])
  else if (startsWith(a, "--workspace=")) workspace <- as.numeric(sub("--workspace=", "", a, fixed = TRUE))
  else files <- c(files, a)
}
num <- function(x) {
  if (length(x) == 0 || is.null(x)) return("null")
  if (is.na(x)) return("null")
  if (is.infinite(x)) return(if (x > 0) "\"Inf\"" else "\"-Inf\"")
  sprintf("%.17g", x)
}
vec <- function(v) paste0("[", paste(vapply(v, num, ""), collapse = ","), "]")
mat <- function(m) paste0("[", paste(apply(m, 1, vec), collapse = ","), "]")
str <- function(s) paste0("\"", gsub("\"", "'", gsub("\n", " ", s)), "\"")
out <- character(0)
for (f in files) {
  d <- read.csv(f, check.names = FALSE, row.names = 1)
  x <- as.matrix(d); storage.mode(x) <- "double"
  fj <- tryCatch({
    r <- fisher.test(x, alternative = alternative, workspace = workspace)
    if (!is.null(r$estimate))
      sprintf("{\"p\":%s,\"odds_ratio\":%s,\"conf_int\":%s}", num(r$p.value), num(unname(r$estimate)), vec(r$conf.int))
    else sprintf("{\"p\":%s,\"odds_ratio\":null,\"conf_int\":null}", num(r$p.value))
  }, error = function(e) sprintf("{\"error\":%s}", str(conditionMessage(e))))
  y <- x[rowSums(x) > 0, colSums(x) > 0, drop = FALSE]
  warn <- NULL
  cj <- tryCatch({
    r <- withCallingHandlers(chisq.test(y, correct = correct),
                             warning = function(w) { warn <<- conditionMessage(w); invokeRestart("muffleWarning") })
    sprintf("{\"statistic\":%s,\"df\":%s,\"p\":%s,\"expected\":%s,\"residuals\":%s,\"stdres\":%s,\"warning\":%s}",
            num(unname(r$statistic)), num(unname(r$parameter)), num(r$p.value), mat(r$expected),
            mat(r$residuals), mat(r$stdres), if (is.null(warn)) "null" else str(warn))
  }, error = function(e) sprintf("{\"error\":%s}", str(conditionMessage(e))))
  sj <- ""
  if (!is.null(sim)) {
    ps <- vapply(seq_len(sim[2]), function(s) { set.seed(s); fisher.test(x, simulate.p.value = TRUE, B = sim[1])$p.value }, 0)
    sj <- paste0(",\"fisher_sim\":", vec(ps))
  }
  out <- c(out, sprintf("{\"file\":%s,\"fisher\":%s,\"chisq\":%s%s}", str(f), fj, cj, sj))
}
cat("[", paste(out, collapse = ","), "]\n", sep = "")
