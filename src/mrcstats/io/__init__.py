"""mrcstats.io"""
