"""mrcstats.query"""
