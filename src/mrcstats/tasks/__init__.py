"""mrcstats.tasks"""
