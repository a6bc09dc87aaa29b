#!/usr/bin/env Rscript
# Seed 003 (RACE-h) GLMERs from a CSV, as the paper's Appendix B fits them, printed as JSON.
#
# Usage: Rscript R/seed003_glmer.R DATA.csv [--features scaled_tok,scaled_con] [--lme4-defaults]
#
# DATA has one row per (question, LLM): `correct` (0/1), `LLM`, `passage` and the scaled
# features.  For each feature x the model is
#   glmer(correct ~ x * LLM + (1 | passage), family = binomial), LLM sum-coded (contr.sum),
# LLM levels in code-point order, fitted to convergence (tolPwrss 1e-13, relaxed to 1e-10 on
# PIRLS failure; --lme4-defaults for glmerControl() as published).  Per feature the output has
# the fit (keys of R/fit_glmer.R), car::vif (`gvif`), drop1(m, test = "Chisq") (`drop1`) and the
# ablative likelihood-ratio tests of the paper, anova() of each model in the sequence
#   correct ~ 1 + (1|passage) -> + x -> + LLM -> + x:LLM
# against the one before it (`ablation`).

script_dir <- function() {
  f <- sub("^--file=", "", grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE))
  if (length(f)) dirname(normalizePath(f[1])) else getwd()
}
source(Sys.getenv("MRCSTATS_GLMER_R",
                  file.path(script_dir(), "..", "src", "mrcstats", "models", "glmer_lme4.R")))

fail <- function(msg) {
  cat(mrc_to_json(list(error = msg)), "\n", sep = "")
  quit(save = "no", status = 2)
}

argv <- commandArgs(trailingOnly = TRUE)
if (!length(argv) || startsWith(argv[1], "--")) fail("usage: seed003_glmer.R DATA.csv [--features a,b] [--lme4-defaults]")
features <- c("scaled_tok", "scaled_con")
k <- match("--features", argv)
if (!is.na(k)) features <- strsplit(argv[k + 1L], ",", fixed = TRUE)[[1]]
lme4_defaults <- "--lme4-defaults" %in% argv

d <- tryCatch(read.csv(argv[1], stringsAsFactors = FALSE, na.strings = c("", "NA")),
              error = function(e) fail(paste0("cannot read ", argv[1], ": ", conditionMessage(e))))
d <- tryCatch(mrc_prepare(d, c("correct", "LLM", "passage", features), contrasts = list(LLM = "sum")),
              error = function(e) fail(paste0(argv[1], ": ", conditionMessage(e))))

out <- list()
for (x in features) {
  f_full <- sprintf("correct ~ %s * LLM + (1 | passage)", x)
  fit <- tryCatch(mrc_fit(f_full, d, lme4_defaults = lme4_defaults), error = function(e) fail(conditionMessage(e)))
  res <- mrc_extract(fit, f_full, 1L, lme4_defaults)
  res$gvif <- mrc_gvif(fit$model)
  res$drop1 <- mrc_drop1(fit$model)
  steps <- c("correct ~ 1 + (1 | passage)", sprintf("correct ~ %s + (1 | passage)", x),
             sprintf("correct ~ %s + LLM + (1 | passage)", x), f_full)
  fits <- lapply(steps[-4], function(f) mrc_fit(f, d, lme4_defaults = lme4_defaults, env = fit$env)$model)
  fits[[4]] <- fit$model
  res$ablation <- lapply(2:4, function(i) {
    a <- mrc_anova(fits[[i - 1]], fits[[i]])
    c(list(reduced = steps[i - 1], full = steps[i]), a[c("chisq", "df", "p")])
  })
  out[[x]] <- res
}
cat(mrc_to_json(out), "\n", sep = "")
