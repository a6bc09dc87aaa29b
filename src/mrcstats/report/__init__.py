"""mrcstats.report"""
