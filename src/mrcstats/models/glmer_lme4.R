# lme4 side of mrcstats' GLMM engine: functions shared by R/fit_glmer.R (Rscript, CSV in,
# JSON out) and mrcstats.models.r_engine (rpy2).  Sourcing this file defines functions only.
#
# The fit is glmer(formula, data, family = family (binomial by default), nAGQ = nagq,
#                  control = glmerControl(tolPwrss = 1e-13));
# when lme4's penalized IRLS fails ('PIRLS step-halvings failed' / 'pwrssUpdate' errors)
# it is repeated with tolPwrss = 1e-10 and a message says so.  lme4_defaults = TRUE uses
# glmerControl() as is (tolPwrss = 1e-7, the numbers lme4 users see).

suppressPackageStartupMessages(library(lme4))
# code-point order for factor() and sort(), as mrcstats' native design
invisible(Sys.setlocale("LC_COLLATE", "C"))

# ---------------------------------------------------------------- JSON writer
mrc_json_str <- function(s) {
  s <- gsub("\\", "\\\\", s, fixed = TRUE)
  s <- gsub("\"", "\\\"", s, fixed = TRUE)
  s <- gsub("\n", "\\n", s, fixed = TRUE)
  s <- gsub("\r", "\\r", s, fixed = TRUE)
  s <- gsub("\t", "\\t", s, fixed = TRUE)
  paste0("\"", s, "\"")
}

mrc_json_atom <- function(v) {
  if (is.na(v)) return("null")
  if (is.logical(v)) return(if (v) "true" else "false")
  if (is.numeric(v)) {
    if (is.infinite(v)) return(if (v > 0) "\"Inf\"" else "\"-Inf\"")
    return(sprintf("%.17g", v))
  }
  mrc_json_str(as.character(v))
}

# Mark a vector to be written as a JSON array even when it has length 0 or 1.
mrc_array <- function(x) structure(list(x = x), class = "mrc_json_array")

# Named vectors and lists -> objects, matrices -> {row: {col: v}}, unnamed length-1 -> scalar.
mrc_to_json <- function(x) {
  if (inherits(x, "mrc_json_array")) {
    v <- x$x
    if (is.list(v)) return(paste0("[", paste(vapply(v, mrc_to_json, ""), collapse = ","), "]"))
    return(paste0("[", paste(vapply(as.list(v), mrc_json_atom, ""), collapse = ","), "]"))
  }
  if (is.null(x)) return("null")
  if (is.matrix(x)) {
    rows <- lapply(seq_len(nrow(x)), function(i) setNames(x[i, ], colnames(x)))
    names(rows) <- rownames(x)
    return(mrc_to_json(rows))
  }
  if (is.list(x)) {
    if (is.null(names(x))) return(paste0("[", paste(vapply(x, mrc_to_json, ""), collapse = ","), "]"))
    parts <- vapply(seq_along(x), function(i)
      paste0(mrc_json_str(names(x)[i]), ":", mrc_to_json(x[[i]])), "")
    return(paste0("{", paste(parts, collapse = ","), "}"))
  }
  if (is.factor(x)) x <- as.character(x)
  if (!is.null(names(x))) {
    parts <- vapply(seq_along(x), function(i)
      paste0(mrc_json_str(names(x)[i]), ":", mrc_json_atom(x[[i]])), "")
    return(paste0("{", paste(parts, collapse = ","), "}"))
  }
  if (length(x) == 1L) return(mrc_json_atom(x))
  paste0("[", paste(vapply(as.list(x), mrc_json_atom, ""), collapse = ","), "]")
}

# ---------------------------------------------------------------- data
# Character columns among `vars` become factors with code-point sorted levels (R's order
# under LC_COLLATE=C) unless `levels[[v]]` gives them; `contrasts[[v]]` is "sum" or
# "treatment".  Stops with a message naming the column on bad input.
mrc_prepare <- function(d, vars, levels = list(), contrasts = list(), weights = NULL) {
  missing_vars <- setdiff(vars, names(d))
  if (length(missing_vars)) stop("column(s) not in the data: ", paste(missing_vars, collapse = ", "))
  for (v in vars) {
    given <- levels[[v]]
    if (!is.null(given)) {
      x <- as.character(d[[v]])
      bad <- setdiff(unique(x[!is.na(x)]), given)
      if (length(bad)) stop("column ", v, " has values not in its levels: ", paste(bad, collapse = ", "))
      d[[v]] <- factor(x, levels = given)
    } else if (is.character(d[[v]])) {
      d[[v]] <- factor(d[[v]], levels = sort(unique(d[[v]][!is.na(d[[v]])]), method = "radix"))
    }
  }
  for (v in names(contrasts)) {
    if (!(v %in% names(d)) || !is.factor(d[[v]])) stop("contrasts for ", v, ": not a factor column")
    k <- nlevels(d[[v]])
    contrasts(d[[v]]) <- if (contrasts[[v]] == "sum") contr.sum(k) else contr.treatment(levels(d[[v]]))
  }
  if (!is.null(weights)) {
    if (!(weights %in% names(d))) stop("weights: no column ", weights)
    d[[".mrc_weights"]] <- as.numeric(d[[weights]])
  }
  d
}

# ---------------------------------------------------------------- fitting
mrc_is_pirls_failure <- function(msg) grepl("step-halving|pwrssUpdate|PIRLS", msg)

# One glmer call evaluated in its own environment holding `d` and `ctrl`, so that
# drop1()/update()/anova() on the result re-evaluate the call as lme4 expects.
mrc_fit_once <- function(formula, d, nagq, weighted, tol, env = NULL, family = "binomial") {
  if (is.null(env)) env <- new.env(parent = globalenv())
  env$d <- d
  env$ctrl <- if (is.null(tol)) glmerControl() else glmerControl(tolPwrss = tol)
  f <- as.formula(formula, env = env)
  fam <- as.name(family)
  cl <- if (weighted)
    bquote(glmer(.(f), data = d, family = .(fam), nAGQ = .(nagq), control = ctrl,
                 weights = .mrc_weights))
  else bquote(glmer(.(f), data = d, family = .(fam), nAGQ = .(nagq), control = ctrl))
  warns <- character()
  # warnings and messages (e.g. "boundary (singular) fit: ...") are kept, not printed
  m <- withCallingHandlers(eval(cl, env), warning = function(w) {
    warns <<- c(warns, conditionMessage(w))
    invokeRestart("muffleWarning")
  }, message = function(msg) {
    warns <<- c(warns, sub("\n$", "", conditionMessage(msg)))
    invokeRestart("muffleMessage")
  })
  list(model = m, warnings = warns, env = env)
}

# Fit with tolPwrss = tol (1e-13 by default), relaxed to 1e-10 when PIRLS fails; or with
# lme4's defaults.  Returns list(model, tol, messages, seconds, env).
mrc_fit <- function(formula, d, nagq = 1L, weighted = FALSE, lme4_defaults = FALSE,
                    tol = NULL, env = NULL, family = "binomial") {
  t0 <- proc.time()[["elapsed"]]
  if (lme4_defaults) {
    r <- mrc_fit_once(formula, d, nagq, weighted, NULL, env, family)
    return(list(model = r$model, tol = 1e-7, messages = r$warnings,
                seconds = proc.time()[["elapsed"]] - t0, env = r$env))
  }
  if (is.null(tol)) tol <- 1e-13
  msgs <- character()
  r <- tryCatch(mrc_fit_once(formula, d, nagq, weighted, tol, env, family), error = function(e) e)
  if (inherits(r, "error") && mrc_is_pirls_failure(conditionMessage(r)) && tol < 1e-10) {
    msgs <- paste0("tolPwrss relaxed from ", format(tol), " to 1e-10: ", conditionMessage(r))
    tol <- 1e-10
    r <- tryCatch(mrc_fit_once(formula, d, nagq, weighted, tol, env, family), error = function(e) e)
  }
  if (inherits(r, "error")) stop("glmer failed: ", conditionMessage(r))
  list(model = r$model, tol = tol, messages = c(msgs, r$warnings),
       seconds = proc.time()[["elapsed"]] - t0, env = r$env)
}

# ---------------------------------------------------------------- results
mrc_extract <- function(fit, formula, nagq, lme4_defaults = FALSE, with_ranef = FALSE) {
  m <- fit$model
  ll <- logLik(m)
  V <- as.matrix(vcov(m))
  fe <- fixef(m)
  se <- sqrt(diag(V))
  names(se) <- names(fe)
  z <- fe / se
  vc <- VarCorr(m)
  varcorr <- lapply(names(vc), function(g) {
    s <- attr(vc[[g]], "stddev")
    list(name = mrc_array(names(s)), variance = mrc_array(unname(s^2)), sd = mrc_array(unname(s)))
  })
  names(varcorr) <- names(vc)
  conv <- m@optinfo$conv$lme4$messages
  res <- residuals(m, "pearson", scaled = TRUE)
  q <- quantile(res, na.rm = TRUE)
  names(q) <- c("Min", "1Q", "Median", "3Q", "Max")
  X <- getME(m, "X")
  out <- list(
    formula = formula,
    engine = "lme4",
    lme4_version = as.character(packageVersion("lme4")),
    tol_pwrss = fit$tol,
    lme4_defaults = lme4_defaults,
    nagq = nagq,
    nobs = nobs(m),
    ngroups = as.list(ngrps(m)),
    fixef = fe,
    se = se,
    z = z,
    p = 2 * pnorm(-abs(z)),
    vcov = V,
    vcov_rx = suppressWarnings(as.matrix(vcov(m, use.hessian = FALSE))),
    vcov_method = "hessian",
    corr = cov2cor(V),
    assign = mrc_array(attr(X, "assign")),
    term_labels = mrc_array(attr(terms(m), "term.labels")),
    theta = getME(m, "theta"),
    varcorr = varcorr,
    loglik = as.numeric(ll),
    aic = AIC(m),
    bic = BIC(m),
    minus2loglik = -2 * as.numeric(ll),
    deviance = deviance(m),
    df_resid = df.residual(m),
    npar = attr(ll, "df"),
    converged = !any(!grepl("boundary (singular) fit", conv, fixed = TRUE)),
    singular = isSingular(m),
    messages = mrc_array(unique(c(fit$messages, conv))),
    resid_quantiles = q,
    fit_seconds = fit$seconds
  )
  if (with_ranef) out$ranef <- mrc_ranef(m)
  out
}

mrc_ranef <- function(m) {
  re <- ranef(m, condVar = TRUE)
  out <- lapply(names(re), function(g) {
    pv <- attr(re[[g]], "postVar")
    lv <- rownames(re[[g]])
    r <- lapply(seq_along(lv), function(i) list(mode = re[[g]][i, 1], condvar = pv[1, 1, i]))
    names(r) <- lv
    r
  })
  names(out) <- names(re)
  out
}

# drop1(m, test = "Chisq"): the terms of drop.scope(m), each refitted without it.
mrc_drop1 <- function(m) {
  dr <- tryCatch(withCallingHandlers(drop1(m, test = "Chisq"),
                                     warning = function(w) invokeRestart("muffleWarning")),
                 error = function(e) e)
  if (inherits(dr, "error")) return(list(error = conditionMessage(dr)))
  dr <- dr[-1, , drop = FALSE]
  list(term = mrc_array(rownames(dr)), npar = mrc_array(dr$npar), aic = mrc_array(dr$AIC),
       chisq = mrc_array(dr$LRT), df = mrc_array(dr$npar), p = mrc_array(dr[["Pr(Chi)"]]))
}

# car::vif(m): GVIF, Df and GVIF^(1/(2*Df)) (also when every Df is 1 and car returns a vector).
mrc_gvif <- function(m) {
  suppressPackageStartupMessages(library(car))
  gw <- character()
  g <- tryCatch(withCallingHandlers(car::vif(m), warning = function(w) {
    gw <<- c(gw, conditionMessage(w))
    invokeRestart("muffleWarning")
  }), error = function(e) e)
  if (inherits(g, "error")) return(list(error = conditionMessage(g), warnings = mrc_array(gw)))
  if (!is.matrix(g)) g <- cbind(GVIF = g, Df = 1)
  list(term = mrc_array(rownames(g)), gvif = mrc_array(unname(g[, 1])),
       df = mrc_array(unname(g[, 2])), gvif_adj = mrc_array(unname(g[, 1]^(1 / (2 * g[, 2])))),
       warnings = mrc_array(gw))
}

# anova(m0, m1): R's table (sorted by npar) and the likelihood-ratio test of the larger model.
mrc_anova <- function(m0, m1) {
  a <- anova(m0, m1, model.names = c("m0", "m1"))
  list(model = mrc_array(rownames(a)), npar = mrc_array(a$npar), aic = mrc_array(a$AIC),
       bic = mrc_array(a$BIC), loglik = mrc_array(a$logLik), deviance = mrc_array(a$deviance),
       chisq = a$Chisq[2], df = a$Df[2], p = a[["Pr(>Chisq)"]][2])
}
