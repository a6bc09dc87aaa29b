"""mrcstats.models"""
