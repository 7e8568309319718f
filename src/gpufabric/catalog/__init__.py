"""gpufabric.catalog"""
