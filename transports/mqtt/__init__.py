"""``mqtt://``: MQTT 5 and 3.1.1 through paho-mqtt, one module per concern. The transport
is :class:`jmspy.transports.mqtt.transport.MqttTransport` (see its module for how the
parts compose); importing this package alone loads nothing."""
