"""gpufabric.model"""
