"""gpufabric.plan"""
