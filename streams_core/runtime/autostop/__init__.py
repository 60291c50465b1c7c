"""KIP-95 batch runs (`autostop.at`): how a run ends, the metadata topic, the instance and thread sides."""
