"""gpufabric.configure"""
