-- dupescope's own database beside the exporter's.
CREATE DATABASE IF NOT EXISTS {own:Identifier}
