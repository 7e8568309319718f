"""Hardware and price catalog: YAML data, each figure with source and as_of."""

from gpufabric.catalog.loader import Catalog, load_catalog
from gpufabric.catalog.schema import Fabric, Gpu, Optic, Provenance, Site, Storage, Switch

__all__ = ["Catalog", "Fabric", "Gpu", "Optic", "Provenance", "Site", "Storage", "Switch", "load_catalog"]
