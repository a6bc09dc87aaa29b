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
#                   control = glmerControl(tolPwrss = 1e-13))`; when lme4's penalized IRLS
# fails ('PIRLS step-halvings failed' / 'pwrssUpdate' errors) the fit is repeated with
# tolPwrss = 1e-10 and a message says so.  `--lme4-defaults` uses glmerControl() as is
# (tolPwrss = 1e-7: the numbers lme4 users see, with the conditional modes not fully
# converged).  Character columns used by the formula become factors whose levels are
# sorted by code point (R's order under LC_COLLATE=C) unless `--levels` gives them, the
# same rule as mrcstats' native engine; `--contrasts NAME=sum` sets contr.sum.
#
# Output keys: formula, engine, lme4_version, tol_pwrss, nagq, nobs, ngroups, fixef, se,
# z, p, vcov, corr, theta, varcorr, loglik, aic, bic, minus2loglik, deviance, df_resid,
# npar, converged, singular, messages, resid_quantiles, fit_seconds and, when asked,
# ranef, drop1, gvif, anova.  Errors print {"error": "..."} and exit with status 2.
# The JSON writer is local, so only lme4 (and car for --gvif) are needed.

suppressPackageStartupMessages(library(lme4))

# ---------------------------------------------------------------- JSON writer
json_str <- function(s) {
  s <- gsub("\\", "\\\\", s, fixed = TRUE)
  s <- gsub("\"", "\\\"", s, fixed = TRUE)
  s <- gsub("\n", "\\n", s, fixed = TRUE)
  s <- gsub("\r", "\\r", s, fixed = TRUE)
  s <- gsub("\t", "\\t", s, fixed = TRUE)
  paste0("\"", s, "\"")
}

json_atom <- function(v) {
  if (is.na(v)) return("null")
  if (is.logical(v)) return(if (v) "true" else "false")
  if (is.numeric(v)) {
    if (is.infinite(v)) return(if (v > 0) "\"Inf\"" else "\"-Inf\"")
    return(sprintf("%.17g", v))
  }
  json_str(as.character(v))
}

as_array <- function(x) structure(list(x = x), class = "json_array")

to_json <- function(x) {
  if (inherits(x, "json_array")) {
    v <- x$x
    if (is.list(v)) return(paste0("[", paste(vapply(v, to_json, ""), collapse = ","), "]"))
    return(paste0("[", paste(vapply(as.list(v), json_atom, ""), collapse = ","), "]"))
  }
  if (is.null(x)) return("null")
  if (is.matrix(x)) {
    rows <- lapply(seq_len(nrow(x)), function(i) setNames(x[i, ], colnames(x)))
    names(rows) <- rownames(x)
    return(to_json(rows))
  }
  if (is.list(x)) {
    if (is.null(names(x))) return(paste0("[", paste(vapply(x, to_json, ""), collapse = ","), "]"))
    parts <- vapply(seq_along(x), function(i) paste0(json_str(names(x)[i]), ":", to_json(x[[i]])), "")
    return(paste0("{", paste(parts, collapse = ","), "}"))
  }
  if (is.factor(x)) x <- as.character(x)
  if (!is.null(names(x))) {
    parts <- vapply(seq_along(x), function(i) paste0(json_str(names(x)[i]), ":", json_atom(x[[i]])), "")
    return(paste0("{", paste(parts, collapse = ","), "}"))
  }
  if (length(x) == 1L) return(json_atom(x))
  paste0("[", paste(vapply(as.list(x), json_atom, ""), collapse = ","), "]")
}

fail <- function(msg) {
  cat(to_json(list(error = msg)), "\n", sep = "")
  quit(save = "no", status = 2)
}

# ---------------------------------------------------------------- arguments
parse_args <- function(argv) {
  opt <- list(data = NULL, formula = NULL, contrasts = character(), levels = list(),
              weights = NULL, nagq = 1L, tol = NULL, lme4_defaults = FALSE, drop1 = FALSE,
              gvif = FALSE, ranef = FALSE, compare = NULL)
  i <- 1L
  value <- function() {
    if (i + 1L > length(argv)) fail(paste0(argv[i], " needs a value"))
    argv[i + 1L]
  }
  while (i <= length(argv)) {
    a <- argv[i]
    if (a %in% c("--lme4-defaults", "--drop1", "--gvif", "--ranef")) {
      opt[[switch(a, "--lme4-defaults" = "lme4_defaults", "--drop1" = "drop1",
                  "--gvif" = "gvif", "--ranef" = "ranef")]] <- TRUE
      i <- i + 1L
      next
    }
    v <- value()
    if (a == "--data") opt$data <- v
    else if (a == "--formula") opt$formula <- v
    else if (a == "--weights") opt$weights <- v
    else if (a == "--nagq") opt$nagq <- as.integer(v)
    else if (a == "--tolPwrss") opt$tol <- as.numeric(v)
    else if (a == "--compare") opt$compare <- v
    else if (a == "--contrasts") {
      kv <- strsplit(v, "=", fixed = TRUE)[[1]]
      if (length(kv) != 2L || !(kv[2] %in% c("sum", "treatment")))
        fail(paste0("--contrasts expects NAME=sum|treatment, got '", v, "'"))
      opt$contrasts[kv[1]] <- kv[2]
    } else if (a == "--levels") {
      k <- sub("=.*$", "", v)
      if (k == v) fail(paste0("--levels expects NAME=a,b,c, got '", v, "'"))
      opt$levels[[k]] <- strsplit(sub("^[^=]*=", "", v), ",", fixed = TRUE)[[1]]
    } else fail(paste0("unknown argument '", a, "'"))
    i <- i + 2L
  }
  if (is.null(opt$data) || is.null(opt$formula)) fail("--data and --formula are required")
  if (is.na(opt$nagq) || opt$nagq < 0L) fail("--nagq must be a non-negative integer")
  opt
}

opt <- parse_args(commandArgs(trailingOnly = TRUE))

# ---------------------------------------------------------------- data
d <- tryCatch(read.csv(opt$data, stringsAsFactors = FALSE, check.names = FALSE,
                       na.strings = c("", "NA")),
              error = function(e) fail(paste0("cannot read ", opt$data, ": ", conditionMessage(e))))
form <- tryCatch(as.formula(opt$formula, env = globalenv()),
                 error = function(e) fail(paste0("cannot parse formula: ", conditionMessage(e))))
vars <- unique(c(all.vars(form), if (!is.null(opt$compare)) all.vars(as.formula(opt$compare))))
missing_vars <- setdiff(vars, names(d))
if (length(missing_vars)) fail(paste0("column(s) not in ", opt$data, ": ", paste(missing_vars, collapse = ", ")))

for (v in vars) {
  given <- opt$levels[[v]]
  if (!is.null(given)) {
    x <- as.character(d[[v]])
    bad <- setdiff(unique(x[!is.na(x)]), given)
    if (length(bad)) fail(paste0("column ", v, " has values not in --levels: ", paste(bad, collapse = ", ")))
    d[[v]] <- factor(x, levels = given)
  } else if (is.character(d[[v]])) {
    # code-point order, as R sorts under LC_COLLATE=C (method = "radix" ignores the locale)
    d[[v]] <- factor(d[[v]], levels = sort(unique(d[[v]][!is.na(d[[v]])]), method = "radix"))
  }
}
for (v in names(opt$contrasts)) {
  if (!(v %in% names(d)) || !is.factor(d[[v]])) fail(paste0("--contrasts ", v, ": not a factor column"))
  k <- nlevels(d[[v]])
  if (opt$contrasts[[v]] == "sum") contrasts(d[[v]]) <- contr.sum(k)
  else contrasts(d[[v]]) <- contr.treatment(k)
}
if (!is.null(opt$weights)) {
  if (!(opt$weights %in% names(d))) fail(paste0("--weights: no column ", opt$weights))
  d[[".mrc_weights"]] <- as.numeric(d[[opt$weights]])
}

# ---------------------------------------------------------------- fitting
collected <- character()

fit_once <- function(f, tol) {
  ctrl <<- if (is.null(tol)) glmerControl() else glmerControl(tolPwrss = tol)
  cl <- if (is.null(opt$weights))
    bquote(glmer(.(f), data = d, family = binomial, nAGQ = .(opt$nagq), control = ctrl))
  else
    bquote(glmer(.(f), data = d, family = binomial, nAGQ = .(opt$nagq), control = ctrl,
                 weights = .mrc_weights))
  withCallingHandlers(eval(cl, globalenv()),
                      warning = function(w) {
                        collected <<- c(collected, conditionMessage(w))
                        invokeRestart("muffleWarning")
                      })
}

is_pirls_failure <- function(msg) grepl("step-halving|pwrssUpdate|PIRLS", msg)

# The fit used for the reported model; relaxes tolPwrss 1e-13 -> 1e-10 on PIRLS failure.
fit_glmer <- function(f) {
  if (opt$lme4_defaults) return(list(model = fit_once(f, NULL), tol = 1e-7))
  tol <- if (is.null(opt$tol)) 1e-13 else opt$tol
  m <- tryCatch(fit_once(f, tol), error = function(e) e)
  if (inherits(m, "error") && is_pirls_failure(conditionMessage(m)) && tol < 1e-10) {
    collected <<- c(collected, paste0("tolPwrss relaxed from ", format(tol), " to 1e-10: ",
                                      conditionMessage(m)))
    tol <- 1e-10
    m <- tryCatch(fit_once(f, tol), error = function(e) e)
  }
  if (inherits(m, "error")) fail(paste0("glmer failed: ", conditionMessage(m)))
  list(model = m, tol = tol)
}

t0 <- proc.time()[["elapsed"]]
fit <- fit_glmer(form)
fit_seconds <- proc.time()[["elapsed"]] - t0
m <- fit$model
ctrl <- if (opt$lme4_defaults) glmerControl() else glmerControl(tolPwrss = fit$tol)

# ---------------------------------------------------------------- results
ll <- logLik(m)
V <- as.matrix(vcov(m))
fe <- fixef(m)
se <- sqrt(diag(V))
names(se) <- names(fe)
z <- fe / se
vc <- VarCorr(m)
varcorr <- lapply(names(vc), function(g) {
  s <- attr(vc[[g]], "stddev")
  list(name = as_array(names(s)), variance = unname(s^2), sd = unname(s))
})
names(varcorr) <- names(vc)
conv <- m@optinfo$conv$lme4$messages
res <- residuals(m, "pearson", scaled = TRUE)
q <- quantile(res, na.rm = TRUE)
names(q) <- c("Min", "1Q", "Median", "3Q", "Max")

out <- list(
  formula = opt$formula,
  engine = "lme4",
  lme4_version = as.character(packageVersion("lme4")),
  tol_pwrss = if (opt$lme4_defaults) 1e-7 else fit$tol,
  lme4_defaults = opt$lme4_defaults,
  nagq = opt$nagq,
  nobs = nobs(m),
  ngroups = as.list(ngrps(m)),
  fixef = fe,
  se = se,
  z = z,
  p = 2 * pnorm(-abs(z)),
  vcov = V,
  corr = cov2cor(V),
  theta = getME(m, "theta"),
  varcorr = varcorr,
  loglik = as.numeric(ll),
  aic = AIC(m),
  bic = BIC(m),
  minus2loglik = -2 * as.numeric(ll),
  deviance = deviance(m),
  df_resid = df.residual(m),
  npar = attr(ll, "df"),
  converged = length(conv) == 0L,
  singular = isSingular(m),
  messages = as_array(unique(c(collected, conv))),
  resid_quantiles = q,
  fit_seconds = fit_seconds
)

if (opt$ranef) {
  re <- ranef(m, condVar = TRUE)
  out$ranef <- lapply(names(re), function(g) {
    pv <- attr(re[[g]], "postVar")
    lv <- rownames(re[[g]])
    r <- lapply(seq_along(lv), function(i) list(mode = re[[g]][i, 1], condvar = pv[1, 1, i]))
    names(r) <- lv
    r
  })
  names(out$ranef) <- names(re)
}

if (opt$drop1) {
  dr <- tryCatch(withCallingHandlers(drop1(m, test = "Chisq"),
                                     warning = function(w) invokeRestart("muffleWarning")),
                 error = function(e) e)
  if (inherits(dr, "error")) {
    out$drop1 <- list(error = conditionMessage(dr))
  } else {
    dr <- dr[-1, , drop = FALSE]
    out$drop1 <- list(term = as_array(rownames(dr)), npar = as_array(dr$npar),
                      aic = as_array(dr$AIC), chisq = as_array(dr$LRT),
                      df = as_array(dr$npar), p = as_array(dr[["Pr(Chi)"]]))
  }
}

if (opt$gvif) {
  suppressPackageStartupMessages(library(car))
  gw <- character()
  g <- tryCatch(withCallingHandlers(car::vif(m), warning = function(w) {
    gw <<- c(gw, conditionMessage(w))
    invokeRestart("muffleWarning")
  }), error = function(e) e)
  if (inherits(g, "error")) {
    out$gvif <- list(error = conditionMessage(g), warnings = as_array(gw))
  } else {
    if (!is.matrix(g)) g <- cbind(GVIF = g, Df = 1, "GVIF^(1/(2*Df))" = sqrt(g))
    out$gvif <- list(term = as_array(rownames(g)), gvif = as_array(unname(g[, 1])),
                     df = as_array(unname(g[, 2])),
                     gvif_adj = as_array(unname(g[, 1]^(1 / (2 * g[, 2])))),
                     warnings = as_array(gw))
  }
}

if (!is.null(opt$compare)) {
  m0 <- fit_glmer(as.formula(opt$compare, env = globalenv()))$model
  a <- anova(m0, m, model.names = c("reduced", "full"))
  out$anova <- list(npar = as_array(a$npar), aic = as_array(a$AIC), bic = as_array(a$BIC),
                    loglik = as_array(a$logLik), deviance = as_array(a$deviance),
                    chisq = a$Chisq[2], df = a$Df[2], p = a[["Pr(>Chisq)"]][2])
}

cat(to_json(out), "\n", sep = "")
