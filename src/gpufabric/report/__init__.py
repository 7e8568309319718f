"""gpufabric.report"""
