"""gpufabric.bench"""
