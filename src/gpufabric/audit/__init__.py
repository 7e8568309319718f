"""gpufabric.audit"""
