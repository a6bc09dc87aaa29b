#!/usr/bin/env Rscript
# Fit a binomial GLMM with lme4 from a CSV file and print one JSON object on stdout.
#
# Usage:
#   Rscript R/fit_glmer.R --data DATA.csv --formula "correct ~ scaled_tok * LLM + (1 | passage)"
#       [--contrasts NAME=sum|treatment]... [--levels NAME=a,b,c]... [--weights COL]
#       [--nagq N] [--tolPwrss X] [--lme4-defaults] [--drop1] [--gvif] [--ranef]
#       [--compare "REDUCED FORMULA"]
#
# The fit is `glmer(formula, data, family = binomial, nAGQ = N,
#                   control = glmerControl(tolPwrss = 1e-13))`, repeated with tolPwrss = 1e-10
# when lme4's penalized IRLS fails ('PIRLS step-halvings failed' / 'pwrssUpdate'); see
# src/mrcstats/models/glmer_lme4.R (the functions shared with the rpy2 engine).
# `--lme4-defaults` uses glmerControl() as is (tolPwrss = 1e-7).  Character columns used by
# the formula become factors with code-point sorted levels (R's order under LC_COLLATE=C)
# unless `--levels` gives them; `--contrasts NAME=sum` sets contr.sum.  Empty CSV cells
# and "NA" are missing; rows with a missing formula variable are dropped (na.omit).
#
# Output keys: formula, engine, lme4_version, tol_pwrss, lme4_defaults, nagq, nobs, ngroups,
# fixef, se, z, p, vcov, corr, assign, term_labels, theta, varcorr, loglik, aic, bic,
# minus2loglik, deviance, df_resid, npar, converged, singular, messages, resid_quantiles,
# fit_seconds and, when asked, ranef, drop1, gvif, anova.  Errors print {"error": "..."} on
# stdout and exit with status 2.

script_dir <- function() {
  f <- sub("^--file=", "", grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE))
  if (length(f)) dirname(normalizePath(f[1])) else getwd()
}
lib <- Sys.getenv("MRCSTATS_GLMER_R",
                  file.path(script_dir(), "..", "src", "mrcstats", "models", "glmer_lme4.R"))
if (!file.exists(lib)) {
  cat("{\"error\": \"cannot find glmer_lme4.R (set MRCSTATS_GLMER_R)\"}\n")
  quit(save = "no", status = 2)
}
source(lib)

fail <- function(msg) {
  cat(mrc_to_json(list(error = msg)), "\n", sep = "")
  quit(save = "no", status = 2)
}

parse_args <- function(argv) {
  opt <- list(data = NULL, formula = NULL, contrasts = list(), levels = list(),
              weights = NULL, nagq = 1L, tol = NULL, lme4_defaults = FALSE, drop1 = FALSE,
              gvif = FALSE, ranef = FALSE, compare = NULL)
  flags <- c("--lme4-defaults" = "lme4_defaults", "--drop1" = "drop1", "--gvif" = "gvif",
             "--ranef" = "ranef")
  i <- 1L
  while (i <= length(argv)) {
    a <- argv[i]
    if (a %in% names(flags)) {
      opt[[flags[[a]]]] <- TRUE
      i <- i + 1L
      next
    }
    if (i + 1L > length(argv)) fail(paste0(a, " needs a value"))
    v <- argv[i + 1L]
    if (a == "--data") opt$data <- v
    else if (a == "--formula") opt$formula <- v
    else if (a == "--weights") opt$weights <- v
    else if (a == "--nagq") opt$nagq <- suppressWarnings(as.integer(v))
    else if (a == "--tolPwrss") opt$tol <- suppressWarnings(as.numeric(v))
    else if (a == "--compare") opt$compare <- v
    else if (a == "--contrasts") {
      kv <- strsplit(v, "=", fixed = TRUE)[[1]]
      if (length(kv) != 2L || !(kv[2] %in% c("sum", "treatment")))
        fail(paste0("--contrasts expects NAME=sum|treatment, got '", v, "'"))
      opt$contrasts[[kv[1]]] <- kv[2]
    } else if (a == "--levels") {
      k <- sub("=.*$", "", v)
      if (k == v) fail(paste0("--levels expects NAME=a,b,c, got '", v, "'"))
      opt$levels[[k]] <- strsplit(sub("^[^=]*=", "", v), ",", fixed = TRUE)[[1]]
    } else fail(paste0("unknown argument '", a, "'"))
    i <- i + 2L
  }
  if (is.null(opt$data) || is.null(opt$formula)) fail("--data and --formula are required")
  if (is.na(opt$nagq) || opt$nagq < 0L) fail("--nagq must be a non-negative integer")
  if (!is.null(opt$tol) && (is.na(opt$tol) || opt$tol <= 0)) fail("--tolPwrss must be a positive number")
  opt
}

opt <- parse_args(commandArgs(trailingOnly = TRUE))
d <- tryCatch(read.csv(opt$data, stringsAsFactors = FALSE, check.names = FALSE,
                       na.strings = c("", "NA")),
              error = function(e) fail(paste0("cannot read ", opt$data, ": ", conditionMessage(e))))
vars <- tryCatch(unique(c(all.vars(as.formula(opt$formula)),
                          if (!is.null(opt$compare)) all.vars(as.formula(opt$compare)))),
                 error = function(e) fail(paste0("cannot parse formula: ", conditionMessage(e))))
d <- tryCatch(mrc_prepare(d, vars, opt$levels, opt$contrasts, opt$weights),
              error = function(e) fail(paste0(opt$data, ": ", conditionMessage(e))))

weighted <- !is.null(opt$weights)
fit <- tryCatch(mrc_fit(opt$formula, d, opt$nagq, weighted, opt$lme4_defaults, opt$tol),
                error = function(e) fail(conditionMessage(e)))
out <- mrc_extract(fit, opt$formula, opt$nagq, opt$lme4_defaults, with_ranef = opt$ranef)
if (opt$drop1) out$drop1 <- mrc_drop1(fit$model)
if (opt$gvif) out$gvif <- mrc_gvif(fit$model)
if (!is.null(opt$compare)) {
  fit0 <- tryCatch(mrc_fit(opt$compare, d, opt$nagq, weighted, opt$lme4_defaults, opt$tol,
                           env = fit$env),
                   error = function(e) fail(paste0("reduced model: ", conditionMessage(e))))
  out$anova <- mrc_anova(fit0$model, fit$model)
}
cat(mrc_to_json(out), "\n", sep = "")
