"""mrcstats.features"""
