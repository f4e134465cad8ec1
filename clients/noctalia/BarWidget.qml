// The bar icon: idle, listening, transcribing, waiting for a confirmation, error or offline
// (the phase from UtterState.js, through Main.qml). Left click toggles push-to-talk; right
// click opens the panel (the last transcript, the result, Approve/Deny).
import QtQuick
import QtQuick.Layouts
import Quickshell
import qs.Commons
import qs.Services.UI
import qs.Widgets

Item {
    id: root

    property var pluginApi: null
    property ShellScreen screen
    property string widgetId: ""
    property string section: ""

    readonly property var main: pluginApi?.mainInstance ?? null
    readonly property string phase: main ? main.phase : "offline"
    readonly property bool hideWhenIdle:
        pluginApi?.pluginSettings?.hideWhenIdle ??
        pluginApi?.manifest?.metadata?.defaultSettings?.hideWhenIdle ??
        false
    readonly property string screenName: screen?.name ?? ""
    readonly property real capsuleHeight: Style.getCapsuleHeightForScreen(screenName)

    visible: !(hideWhenIdle && phase === "idle")
    implicitWidth: visible ? capsuleHeight : 0
    implicitHeight: capsuleHeight

    Accessible.role: Accessible.Button
    Accessible.name: "Utter: " + (main ? main.description : "not running")

    Rectangle {
        id: capsule
        anchors.centerIn: parent
        width: root.capsuleHeight
        height: root.capsuleHeight
        radius: Style.radiusL
        color: {
            switch (root.phase) {
            case "listening": return Color.mPrimary;
            case "confirm": return Color.mTertiary;
            case "error": return Color.mError;
            default: return mouse.containsMouse ? Color.mHover : Style.capsuleColor;
            }
        }
        border.color: Style.capsuleBorderColor
        border.width: Style.capsuleBorderWidth

        NIcon {
            anchors.centerIn: parent
            icon: root.main ? root.main.iconName : "microphone-off"
            color: {
                switch (root.phase) {
                case "listening": return Color.mOnPrimary;
                case "confirm": return Color.mOnTertiary;
                case "error": return Color.mOnError;
                case "offline": return Color.mOnSurfaceVariant;
                default: return Color.mOnSurface;
                }
            }
            RotationAnimation on rotation {
                running: root.phase === "transcribing"
                from: 0
                to: 360
                duration: 1000
                loops: Animation.Infinite
            }
        }
    }

    MouseArea {
        id: mouse
        anchors.fill: parent
        hoverEnabled: true
        acceptedButtons: Qt.LeftButton | Qt.RightButton
        cursorShape: Qt.PointingHandCursor
        onEntered: TooltipService.show(root, root.main ? root.main.description : "Utter is not running", BarService.getTooltipDirection())
        onExited: TooltipService.hide()
        onClicked: mouse => {
            if (!root.pluginApi)
                return;
            if (mouse.button === Qt.RightButton || root.phase === "confirm") {
                root.pluginApi.togglePanel(root.screen, root);
            } else if (root.main) {
                root.main.togglePushToTalk();
            }
        }
    }
}
