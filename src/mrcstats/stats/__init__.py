"""mrcstats.stats"""
