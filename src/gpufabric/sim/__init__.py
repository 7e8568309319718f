"""gpufabric.sim"""
